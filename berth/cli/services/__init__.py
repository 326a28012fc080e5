"""The commands that run the cloud's services: ``berth serve``, ``berth conductor``, ``berth agent``, and
``berth cloud`` that starts them all on one machine; whether an address they listen on is
exposed (``exposure``)."""
