from common.cli.commands import main
from common.errors import run_cli

if __name__ == "__main__":  # not when a process pool's worker imports this module again (spawn)
    run_cli(main)
