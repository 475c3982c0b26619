/* One model reply, shared by celer generate and celer chat: render the conversation with the
 * model's template, tokenize, generate, and print content (and reasoning, tool calls) as it
 * streams. */
#ifndef CELER_CLI_REPLY_H
#define CELER_CLI_REPLY_H

#include "cli.h"

#include <cjson/cJSON.h>

typedef struct {
    bool  chat;           /* render messages with the chat template; else the last message's text is the prompt */
    bool  show_reasoning; /* print the thinking block too */
    bool  quiet_stats;    /* no summary line on stderr */
    char *content;        /* out: the reply's content (malloc'd), for the conversation history */
} reply_opts;

/* Prints the reply to messages (a JSON array of {role, content}) on stdout; returns the exit code. */
int reply_run(celer_engine *e, const cJSON *messages, const celer_gen_params *gp, reply_opts *o);

#endif
