"""Gang picks: many consumers placed all (or at least ``min_count``) or none in one transaction
(``transaction``), dealt to trees under topology and group policy (``plan``), planned on the host
board where it can (``on_board``), and making room by preemption where they may (``preemption``)."""
