-- The official MCP conformance suite's fixtures (npm @modelcontextprotocol/conformance),
-- written as an ordinary plugin: tool `test:simple_text` has the wire name
-- `test_simple_text` the suite calls, and so on. Resources and prompts are declared in
-- plugin.yaml; the dynamic ones are read by the tools below.

-- A 1x1 red PNG and a tiny WAV, base64.
local PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
local WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

-- Waits `ms` milliseconds (the home's `wait` workflow, a core:Delay node).
local function wait(ms)
  api.tools.call("workflow:wait", { text = "", ms = ms })
end

function simple_text(args, ctx)
  return { content = { { type = "text", text = "This is a simple text response for testing." } } }
end

function image_content(args, ctx)
  return { content = { { type = "image", data = PNG, mimeType = "image/png" } } }
end

function audio_content(args, ctx)
  return { content = { { type = "audio", data = WAV, mimeType = "audio/wav" } } }
end

function embedded_resource(args, ctx)
  return { content = { { type = "resource", resource = {
    uri = "test://embedded-resource", mimeType = "text/plain",
    text = "This is an embedded resource content." } } } }
end

function multiple_content_types(args, ctx)
  return { content = {
    { type = "text", text = "Multiple content types test:" },
    { type = "image", data = PNG, mimeType = "image/png" },
    { type = "resource", resource = { uri = "test://mixed-content-resource",
      mimeType = "application/json", text = "{\"test\":\"data\",\"value\":123}" } } } }
end

function error_handling(args, ctx)
  error("This tool intentionally returns an error for testing", 0)
end

-- Log messages reach MCP clients as notifications/message while the call runs.
function tool_with_logging(args, ctx)
  api.log.info("Tool execution started")
  wait(50)
  api.log.info("Tool processing data")
  wait(50)
  api.log.info("Tool execution completed")
  return "Tool with logging executed successfully"
end

-- Progress reaches clients that sent a progress token as notifications/progress, each
-- as it is reported.
function tool_with_progress(args, ctx)
  api.tools.progress(0, 100, "Completed step 0 of 100")
  wait(50)
  api.tools.progress(50, 100, "Completed step 50 of 100")
  wait(50)
  api.tools.progress(100, 100, "Completed step 100 of 100")
  return "Progress test completed."
end

function reconnection(args, ctx)
  wait(100)
  return "Reconnection test completed successfully."
end

-- MCP sampling: api.llm.chat asks the calling client's model.
function sampling(args, ctx)
  local answer = api.llm.chat({ messages = { { role = "user", content = args.prompt } },
    max_tokens = 100 })
  return "LLM response: " .. answer.text
end

-- MCP elicitation: api.ask shows the user a form.
function elicitation(args, ctx)
  local r = api.ask({ message = args.message, schema = {
    type = "object",
    properties = { response = { type = "string", description = "User's response" } },
    required = { "response" } } })
  return "User response: action=" .. r.action .. ", content=" .. api.json.encode(r.content or {})
end

function elicitation_defaults(args, ctx)
  local r = api.ask({ message = "Please review and update the form fields with defaults",
    schema = { type = "object", properties = {
      name = { type = "string", description = "User name", default = "John Doe" },
      age = { type = "integer", description = "User age", default = 30 },
      score = { type = "number", description = "User score", default = 95.5 },
      status = { type = "string", description = "User status",
        enum = { "active", "inactive", "pending" }, default = "active" },
      verified = { type = "boolean", description = "Verification status", default = true },
    } } })
  return "Elicitation completed: action=" .. r.action .. ", content=" .. api.json.encode(r.content or {})
end

function elicitation_enums(args, ctx)
  local r = api.ask({ message = "Please select options from the enum fields",
    schema = { type = "object", properties = {
      untitledSingle = { type = "string", description = "Select one option",
        enum = { "option1", "option2", "option3" } },
      titledSingle = { type = "string", description = "Select one option with titles",
        oneOf = { { const = "value1", title = "First Option" },
                  { const = "value2", title = "Second Option" },
                  { const = "value3", title = "Third Option" } } },
      legacyEnum = { type = "string", description = "Select one option (legacy)",
        enum = { "opt1", "opt2", "opt3" },
        enumNames = { "Option One", "Option Two", "Option Three" } },
      untitledMulti = { type = "array", description = "Select multiple options",
        minItems = 1, maxItems = 3,
        items = { type = "string", enum = { "option1", "option2", "option3" } } },
      titledMulti = { type = "array", description = "Select multiple options with titles",
        minItems = 1, maxItems = 3,
        items = { anyOf = { { const = "value1", title = "First Choice" },
                            { const = "value2", title = "Second Choice" },
                            { const = "value3", title = "Third Choice" } } } },
    } } })
  return "Elicitation completed: action=" .. r.action .. ", content=" .. api.json.encode(r.content or {})
end

-- Reader of the resource template test://template/{id}/data: gets the uri and the
-- template's variables.
function read_template(args, ctx)
  return { mimeType = "application/json", text = api.json.encode({
    id = args.id, templateTest = true, data = "Data for ID: " .. args.id }) }
end

-- Prompts: a list of messages (content as MCP content blocks).
function prompt_with_arguments(args, ctx)
  return { { role = "user", content = { type = "text",
    text = "Prompt with arguments: arg1='" .. args.arg1 .. "', arg2='" .. args.arg2 .. "'" } } }
end

function prompt_with_embedded_resource(args, ctx)
  return {
    { role = "user", content = { type = "resource", resource = {
      uri = args.resourceUri, mimeType = "text/plain",
      text = "Embedded resource content for testing." } } },
    { role = "user", content = { type = "text",
      text = "Please process the embedded resource above." } },
  }
end

-- A completer: the values of `argument` that start with `value`.
function complete_arg(args, ctx)
  local all = { "paris", "park", "party", "test", "testing" }
  local out = {}
  for _, v in ipairs(all) do
    if v:sub(1, #args.value) == args.value then out[#out + 1] = v end
  end
  return out
end

-- Tells subscribers of test://watched-resource that it changed.
function notify_watched(args, ctx)
  api.resources.notify("test://watched-resource")
  return "notified"
end
