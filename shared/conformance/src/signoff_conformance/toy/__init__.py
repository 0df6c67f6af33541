"""The kit's toy domain: accounts granted a credit (``domain``) or sent a voucher through a
scriptable in-process provider (``vouchers``), the members who decide (``directory``), and the
``case`` fixtures of both operations (``cases``) — for the kit's self-test, signoff's services'
tests, and as an example."""
