import sys

from sapo_gym.cli import main

sys.exit(main())
