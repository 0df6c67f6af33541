"""The operations an assistant may propose on the club, one module each (entry points
``signoff.operations``)."""
