function schema_tool(args, ctx)
  return { content = { { type = "text",
    text = "JSON Schema 2020-12 tool called with: " .. api.json.encode(args) } } }
end
