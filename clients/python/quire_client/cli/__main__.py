import sys

from quire_client.cli.app import main

sys.exit(main())
