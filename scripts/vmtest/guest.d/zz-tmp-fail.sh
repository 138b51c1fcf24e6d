#!/bin/sh
echo "deliberate failure hook"
exit 3
