import sys

from promcp.cli import main

sys.exit(main())
