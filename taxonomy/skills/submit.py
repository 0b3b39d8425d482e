#!/usr/bin/env python3
"""Submits this skill's action with the given arguments to the benchmark backend."""
import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

SKILL = {{skill_literal}}
PAYLOAD_KEY = {{key_literal}}


def main():
    parser = argparse.ArgumentParser(description="Carry out the action.")
    parser.add_argument("--arguments", required=True, help="a JSON object of arguments")
    args = parser.parse_args()
    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as e:
        print(json.dumps({"error": f"--arguments is not JSON: {e}"}))
        return 2
    if not isinstance(arguments, dict):
        print(json.dumps({"error": "--arguments must be a JSON object"}))
        return 2
    base = os.environ.get("PRIVFORGE_BACKEND_URL", "http://127.0.0.1:8477").rstrip("/")
    body = json.dumps(
        {"run": os.environ.get("PRIVFORGE_RUN_ID", ""), "skill": SKILL, "arguments": arguments}
    ).encode("utf-8")
    req = urllib.request.Request(
        f"{base}/v1/execute/{urllib.parse.quote(PAYLOAD_KEY)}",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            reply = json.load(resp)
    except urllib.error.HTTPError as e:
        print(json.dumps({"error": f"backend answered {e.code}"}))
        return 1
    except urllib.error.URLError as e:
        print(json.dumps({"error": f"backend unreachable: {e.reason}"}))
        return 1
    print(json.dumps(reply, ensure_ascii=False, indent=2))
    return 0 if reply.get("status") == "accepted" else 3


if __name__ == "__main__":
    sys.exit(main())
