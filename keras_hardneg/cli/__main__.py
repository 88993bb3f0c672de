"""``python -m keras_hardneg.cli``: the ``keras-hardneg`` command."""

import sys

from keras_hardneg.cli import main

sys.exit(main())
