import sys

from decodelab.cli import main

sys.exit(main())
