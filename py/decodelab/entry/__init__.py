"""The ways in: the command line (`cli`, behind `python -m decodelab`) and the page's worker
(`webapi`, one module per panel). Both check their input against `fields` and call `core` and
`lesson`; neither decides a rule of its own.
"""

import decodelab.pretrained  # noqa: F401  (registers its reader with core's library)
