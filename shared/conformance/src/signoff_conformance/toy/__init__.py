"""The kit's toy domain (see ``domain``): for the kit's self-test and as an example."""
