"""Message codecs: client<->driver commands, and (later) archive/cluster SBE messages from one schema."""
