"""demuxlab: experiments on event-processing design patterns over I/O notifiers, with CTMC models."""

__version__ = "0.1.0"
