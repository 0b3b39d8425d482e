#!/usr/bin/env python3
"""Sends one prompt to the user through the benchmark backend and prints the reply."""
import argparse
import http.client
import json
import os
import sys
from urllib.parse import urlsplit

SKILL = {{skill_literal}}


{{backend_request}}


def main():
    parser = argparse.ArgumentParser(description="Ask the user through the device.")
    parser.add_argument("--prompt", required=True, help="what the user sees")
    args = parser.parse_args()
    body = json.dumps(
        {"run": os.environ.get("PRIVFORGE_RUN_ID", ""), "skill": SKILL, "prompt": args.prompt}
    ).encode("utf-8")
    try:
        status, reply = request("POST", "/v1/interact", body)
    except (OSError, ValueError) as e:
        print(json.dumps({"error": f"backend unreachable: {e}"}))
        return 1
    print(json.dumps(reply, ensure_ascii=False, indent=2))
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
