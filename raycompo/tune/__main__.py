import sys

from raycompo.tune.cli import main

sys.exit(main())
