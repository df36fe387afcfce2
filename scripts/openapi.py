"""Print the OpenAPI document of the whole API (localrun.openapi builds it).

python -m scripts.openapi > docs/openapi.json     (make openapi)
python -m scripts.openapi --errors-table          the table of docs/errors.md
"""

from __future__ import annotations

import json
import sys

from localrun.openapi import document, errors_table


def main() -> None:
    if sys.argv[1:] == ["--errors-table"]:
        sys.stdout.write(errors_table())
        return
    print(json.dumps(document(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
