"""Every subprocess handoff runs goes through here: argv only, never a shell, always a timeout."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from handoff.errors import ExternalFailure, MissingTool, NotFound

DEFAULT_TIMEOUT = 30.0


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv and return its result; raise a HandoffError a person can read on failure."""
    try:
        result = subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input_text,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        if cwd is not None and not Path(cwd).is_dir():
            raise NotFound(f"the folder {cwd} does not exist (needed to run {argv[0]})") from None
        raise MissingTool(
            f"{argv[0]} is not installed or not on PATH",
            f"install {os.path.basename(argv[0])} and try again",
        ) from None
    except PermissionError:
        raise MissingTool(f"{argv[0]} cannot be run (permission denied)",
                          f"make it executable: chmod +x {argv[0]}") from None
    except subprocess.TimeoutExpired:
        raise ExternalFailure(
            f"{' '.join(argv[:3])} … did not finish within {timeout:g}s",
            "something is hanging; check the repository or tmux server and retry",
        ) from None
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise ExternalFailure(
            f"{' '.join(argv[:4])} failed: {detail[-1] if detail else f'exit {result.returncode}'}"
        )
    return result
