#!/usr/bin/env python3
"""Submits this skill's action with the given arguments to the benchmark backend."""
import argparse
import http.client
import json
import os
import sys
from urllib.parse import quote, urlsplit

SKILL = {{skill_literal}}
PAYLOAD_KEY = {{key_literal}}


{{backend_request}}


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
    body = json.dumps(
        {"run": os.environ.get("PRIVFORGE_RUN_ID", ""), "skill": SKILL, "arguments": arguments}
    ).encode("utf-8")
    try:
        status, reply = request("POST", f"/v1/execute/{quote(PAYLOAD_KEY)}", body)
    except (OSError, ValueError) as e:
        print(json.dumps({"error": f"backend unreachable: {e}"}))
        return 1
    print(json.dumps(reply, ensure_ascii=False, indent=2))
    if status != 200:
        return 1
    return 0 if reply.get("status") == "accepted" else 3


if __name__ == "__main__":
    sys.exit(main())
