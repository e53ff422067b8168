"""``python -m tilecraft``: the ``tilecraft`` command."""

from tilecraft.cli import main

if __name__ == "__main__":
    main()
