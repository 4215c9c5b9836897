"""Standing instructions for each role, shipped inside the wheel and read at run time."""
