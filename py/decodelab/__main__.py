import sys

from decodelab.entry.cli import main

sys.exit(main())
