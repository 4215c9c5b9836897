"""The durable ticket record, the truth the loop is rebuilt from: the directory and state.json
(ticket), atomic writes (store), events.jsonl (events), the orchestrator's lock, who may file
(grants), and how events read to a person (render)."""
