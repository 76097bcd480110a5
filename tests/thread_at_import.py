"""Imported by a worker template in tests/test_fork_server.py: starts a thread, as a library might at import."""

import threading
import time

threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
