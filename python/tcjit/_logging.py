"""TCJIT_LOGS: which channels the C runtime reports, through ``logging``.

Each channel is a logger named ``tcjit.<channel>``; TCJIT_LOGS (or
``tcjit.set_logs``) turns channels on and attaches one stderr handler to the
``tcjit`` logger.
"""
import logging
import os
import sys

from . import _C

CHANNELS = {
    "recompiles": _C.LOG_RECOMPILES,
    "guards": _C.LOG_GUARDS,
    "graph": _C.LOG_GRAPH,
    "output_code": _C.LOG_OUTPUT_CODE,
    "graph_breaks": _C.LOG_GRAPH_BREAKS,
    "dynamic": _C.LOG_DYNAMIC,
    "perf_hints": _C.LOG_PERF_HINTS,
    "cache": _C.LOG_CACHE,
}

_root = logging.getLogger("tcjit")
_handler = None


def _parse(spec):
    names = [s.strip().lstrip("+") for s in spec.split(",") if s.strip()]
    if "all" in names:
        return list(CHANNELS)
    unknown = [n for n in names if n not in CHANNELS]
    if unknown:
        raise ValueError(f"unknown TCJIT_LOGS channel(s) {unknown}; "
                         f"known: {', '.join(CHANNELS)}, all")
    return names


def set_logs(spec=""):
    """Enable log channels: ``set_logs("recompiles,graph")``; ``""`` turns
    them all off.  Same syntax as the TCJIT_LOGS environment variable."""
    global _handler
    names = _parse(spec)
    mask = 0
    for n in names:
        mask |= CHANNELS[n]
    _C.set_log_mask(mask)
    for n in CHANNELS:
        logging.getLogger(f"tcjit.{n}").setLevel(
            logging.INFO if n in names else logging.WARNING)
    if names and _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[tcjit:%(channel)s] %(message)s"))
        _root.addHandler(_handler)
    _root.setLevel(logging.INFO if names else logging.WARNING)


def emit(channel, message):
    """Called by the C runtime for each message of an enabled channel."""
    logging.getLogger(f"tcjit.{channel}").info(message, extra={"channel": channel})


def init_from_env():
    spec = os.environ.get("TCJIT_LOGS", "")
    try:
        set_logs(spec)
    except ValueError as e:
        print(f"tcjit: ignoring TCJIT_LOGS: {e}", file=sys.stderr)
