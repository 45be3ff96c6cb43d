import sys

from launcher.cluster import run

sys.exit(run())
