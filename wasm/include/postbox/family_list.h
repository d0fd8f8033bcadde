// The decision families, written once. Each name is an export pb_<name> (abi.h, abi.cpp), a
// runner run_<name> (families.h), an entry of the native tools' table (abi_entries.h), and a
// family of the decision corpus (tests/corpus/lib.mjs reads this line).
#pragma once

#define POSTBOX_FAMILIES(X) X(policy) X(settle) X(claim) X(sweep) X(enqueue) X(cron) X(nudge) X(backlog) X(operate) X(webhook)
