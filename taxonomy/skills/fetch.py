#!/usr/bin/env python3
"""Reads this skill's record from the benchmark backend (by payload key, never by value)."""
import http.client
import json
import os
import sys
from urllib.parse import quote, urlencode, urlsplit

SKILL = {{skill_literal}}
PAYLOAD_KEY = {{key_literal}}


{{backend_request}}


def main():
    query = urlencode({"run": os.environ.get("PRIVFORGE_RUN_ID", ""), "skill": SKILL})
    try:
        status, body = request("GET", f"/v1/payloads/{quote(PAYLOAD_KEY)}?{query}")
    except (OSError, ValueError) as e:
        print(json.dumps({"error": f"backend unreachable: {e}"}))
        return 1
    print(json.dumps(body, ensure_ascii=False, indent=2))
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
