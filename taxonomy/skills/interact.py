#!/usr/bin/env python3
"""Sends one prompt to the user through the benchmark backend and prints the reply."""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request

SKILL = {{skill_literal}}


def main():
    parser = argparse.ArgumentParser(description="Ask the user through the device.")
    parser.add_argument("--prompt", required=True, help="what the user sees")
    args = parser.parse_args()
    base = os.environ.get("PRIVFORGE_BACKEND_URL", "http://127.0.0.1:8477").rstrip("/")
    body = json.dumps(
        {"run": os.environ.get("PRIVFORGE_RUN_ID", ""), "skill": SKILL, "prompt": args.prompt}
    ).encode("utf-8")
    req = urllib.request.Request(
        f"{base}/v1/interact", data=body, headers={"Content-Type": "application/json"}
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
