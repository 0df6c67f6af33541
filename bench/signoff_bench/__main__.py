"""``python -m signoff_bench`` — what ``make bench`` runs."""

from signoff_bench.run import entry

if __name__ == "__main__":
    entry()
