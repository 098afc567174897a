"""Entry points: the command line (:mod:`server.cli`) and the shared run layer."""
