"""What a simulation tells: its report (``report``) and the control plane's CPU (``cpu``)."""
