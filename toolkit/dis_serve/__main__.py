"""`python -m dis_serve ...` is `dis-serve ...`: how generated scripts start the node agent
with the interpreter they name, console script or not."""

from .cli.app import main

main()
