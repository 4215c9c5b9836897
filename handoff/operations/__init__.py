"""What a person does to tickets, as plain functions the command line and the board call:
create, approve, answer, recycle, stop, close (lifecycle); where tickets stand (standing, board);
merge a passed ticket (finish); clean up (gc); check the machine (doctor); the demo."""
