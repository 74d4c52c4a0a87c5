from common.cli.commands import main
from common.errors import run_cli

run_cli(main)
