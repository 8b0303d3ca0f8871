"""`python -m scaling.cli`: the same as the `scaling` command."""

import sys

from scaling.cli.main import main

sys.exit(main())
