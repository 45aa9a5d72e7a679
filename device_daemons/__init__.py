"""Device daemons: inference runtimes that execute IR networks (cpu/, gpu/, hetero)."""
