// cairn capture for OpenCode: hands each conversation and tool event, as one JSON object,
// to `cairn hook --agent opencode` in a process of its own, and never waits for it, so a
// slow or missing cairn never slows the agent down. `cairn hooks install --agent opencode`
// copies this file into .opencode/plugins/ with the absolute path of cairn filled in below;
// CAIRN_BIN, when set, wins.
import { spawn } from "node:child_process"

const CAIRN_COMMAND = "cairn"

// assistant text arrives in pieces (message.part.updated, each with the part's text so
// far); it is sent once, when its message completes
const MAX_PENDING = 200
const pending = new Map() // messageID -> Map(partID -> text)
const sent = new Set()

function send(payload) {
  try {
    const child = spawn(process.env.CAIRN_BIN || CAIRN_COMMAND, ["hook", "--agent", "opencode"], {
      stdio: ["pipe", "ignore", "ignore"],
      windowsHide: true,
    })
    child.on("error", () => {})
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(payload))
    child.unref()
  } catch {
    // capture must never break the agent
  }
}

function remember(set, key) {
  set.add(key)
  if (set.size > MAX_PENDING) set.delete(set.values().next().value)
}

function textOf(parts) {
  return (parts || [])
    .filter((part) => part && part.type === "text" && typeof part.text === "string" && !part.synthetic)
    .map((part) => part.text)
    .join("\n")
}

export const CairnCapture = async ({ directory }) => {
  const base = (name, sessionID) => ({
    hook_event_name: name,
    session_id: sessionID,
    cwd: directory,
    timestamp: new Date().toISOString(),
  })

  return {
    "chat.message": async (input, output) => {
      send({
        ...base("chat.message", input.sessionID),
        message_id: input.messageID ?? output?.message?.id,
        agent: input.agent,
        model: input.model?.modelID,
        text: textOf(output?.parts),
      })
    },
    "tool.execute.before": async (input, output) => {
      send({
        ...base("tool.execute.before", input.sessionID),
        tool: input.tool,
        call_id: input.callID,
        args: output?.args,
      })
    },
    "tool.execute.after": async (input, output) => {
      send({
        ...base("tool.execute.after", input.sessionID),
        tool: input.tool,
        call_id: input.callID,
        title: output?.title,
        output: output?.output,
      })
    },
    event: async ({ event }) => {
      const props = event?.properties ?? {}
      switch (event?.type) {
        case "session.created":
          send({ ...base("session.created", props.info?.id), title: props.info?.title })
          break
        case "session.compacted":
          send(base("session.compacted", props.sessionID))
          break
        case "session.deleted":
          send(base("session.deleted", props.info?.id))
          break
        case "session.error":
          send({ ...base("session.error", props.sessionID), error: props.error })
          break
        case "message.part.updated": {
          const part = props.part
          if (!part || part.type !== "text" || sent.has(part.messageID)) break
          if (!pending.has(part.messageID)) {
            pending.set(part.messageID, new Map())
            if (pending.size > MAX_PENDING) pending.delete(pending.keys().next().value)
          }
          pending.get(part.messageID).set(part.id, part.text ?? "")
          break
        }
        case "message.updated": {
          const info = props.info
          if (!info || info.role !== "assistant" || !info.time?.completed) break
          if (sent.has(info.id)) break
          const parts = pending.get(info.id)
          pending.delete(info.id)
          remember(sent, info.id)
          if (!parts || parts.size === 0) break
          send({
            ...base("assistant.message", info.sessionID),
            message_id: info.id,
            model: info.modelID,
            text: [...parts.values()].join("\n"),
          })
          break
        }
      }
    },
  }
}
