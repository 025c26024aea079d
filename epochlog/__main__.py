import sys

from epochlog.cli.main import main

sys.exit(main())
