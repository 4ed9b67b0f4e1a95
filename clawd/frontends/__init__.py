"""Layer 5: the front ends and the composition root: the command line, the slash
commands, the REPL, the renderers of the loop's events, and the reports they show."""
