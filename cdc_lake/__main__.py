"""``python -m cdc_lake``: the same as the ``cdc-lake`` command."""

from cdc_lake.cli.main import main

if __name__ == "__main__":
    main()
