"""What a person does to tickets, as plain functions the command line and the board call:
create (create), approve (approval), run and resume (resume, more_rounds, onto), answer,
recycle and attach (tending), stop and close (closing); where tickets stand (standing, board);
merge a passed ticket (finish); clean up (gc); check the machine (doctor); the demo."""
