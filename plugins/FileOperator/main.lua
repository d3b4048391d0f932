-- FileOperator tool handlers. Every path goes through api.fs, which confines it to the
-- workspace root declared in plugin.yaml (permissions.fs.write = {config.root}).

local function fail(msg)
  -- Level 0: the message is for the caller, without a Lua file position.
  error(msg, 0)
end

local function need_path(p, key)
  if type(p) ~= "string" or p == "" then
    fail((key or "filePath") .. " must be a non-empty path")
  end
  return p
end

function write_file(args, ctx)
  local path = need_path(args.filePath)
  local content = args.content or ""
  api.fs.write(path, content)
  return { path = path, bytes = #content }
end

function append_file(args, ctx)
  local path = need_path(args.filePath)
  local content = args.content or ""
  api.fs.append(path, content)
  return { path = path, appended = #content }
end

function read_file(args, ctx)
  local path = need_path(args.filePath)
  return api.fs.read(path)
end

-- Counts plain (not pattern) occurrences of `needle` in `text`, without overlaps.
local function occurrences(text, needle)
  local positions = {}
  local from = 1
  while true do
    local s, e = string.find(text, needle, from, true)
    if not s then break end
    positions[#positions + 1] = s
    from = e + 1
  end
  return positions
end

function apply_edit(args, ctx)
  local path = need_path(args.filePath)
  local search = args.search_string
  local replace = args.replace_string or ""
  if type(search) ~= "string" or search == "" then
    fail("search_string must be non-empty text")
  end
  local text = api.fs.read(path)
  local found = occurrences(text, search)
  if #found == 0 then
    fail("search_string was not found in " .. path .. "; read the file and copy the text exactly (including spaces and line breaks)")
  end
  if #found > 1 and not args.replace_all then
    fail("search_string occurs " .. #found .. " times in " .. path ..
      "; add surrounding lines to make it unique, or set replace_all to true")
  end
  local parts = {}
  local prev = 1
  for _, s in ipairs(found) do
    parts[#parts + 1] = string.sub(text, prev, s - 1)
    parts[#parts + 1] = replace
    prev = s + #search
  end
  parts[#parts + 1] = string.sub(text, prev)
  api.fs.write(path, table.concat(parts))
  return { path = path, replacements = #found }
end

function list_directory(args, ctx)
  local path = args.dirPath or "/"
  return api.fs.list(path)
end

function delete_file(args, ctx)
  local path = need_path(args.filePath)
  if path == "/" or path == "." then
    fail("refusing to delete the workspace root")
  end
  api.fs.remove(path)
  return { path = path, deleted = true }
end
