#!/usr/bin/env python3
"""Reads this skill's record from the benchmark backend (by payload key, never by value)."""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

SKILL = {{skill_literal}}
PAYLOAD_KEY = {{key_literal}}


def main():
    base = os.environ.get("PRIVFORGE_BACKEND_URL", "http://127.0.0.1:8477").rstrip("/")
    query = urllib.parse.urlencode(
        {"run": os.environ.get("PRIVFORGE_RUN_ID", ""), "skill": SKILL}
    )
    url = f"{base}/v1/payloads/{urllib.parse.quote(PAYLOAD_KEY)}?{query}"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as e:
        print(json.dumps({"error": f"backend answered {e.code}"}))
        return 1
    except urllib.error.URLError as e:
        print(json.dumps({"error": f"backend unreachable: {e.reason}"}))
        return 1
    print(json.dumps(body, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
