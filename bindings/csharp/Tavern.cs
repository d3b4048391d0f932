// Tavern.cs: C# classes over tavern's C ABI (include/tavern.h, libtavern_capi.so), for
// Unity-style hosts (Mono) and .NET. One file, no dependencies beyond mscorlib and System:
//
//   mcs -target:library -out:Tavern.dll bindings/csharp/Tavern.cs
//
// The native library is found as `tavern_capi` (libtavern_capi.so on Linux, put it beside
// the assembly or on LD_LIBRARY_PATH; tavern_capi.dll on Windows).
//
// Threading: host tools run on engine threads (keep them thread-safe); main-thread tools
// run only inside Engine.Pump (or a blocking Engine.Call) on the thread that registered
// them. No exception crosses into native code: a host tool that throws fails its call
// with the exception's message.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Runtime.InteropServices;
using System.Text;

namespace Tavern
{
    /// <summary>How serious a log line is (the C ABI's TAVERN_LOG_*).</summary>
    public enum LogLevel
    {
        Debug = 0,
        Info = 1,
        Warning = 2,
        Error = 3,
    }

    /// <summary>One line for the log callback: a mod's print or api.log, or an engine warning.</summary>
    public sealed class LogRecord
    {
        public LogLevel Level { get; private set; }
        /// <summary>Who wrote it: plugin:&lt;name&gt;, script:&lt;name&gt;, tool:&lt;id&gt;, or a file.</summary>
        public string Source { get; private set; }
        public string Message { get; private set; }

        internal LogRecord(LogLevel level, string source, string message)
        {
            Level = level;
            Source = source;
            Message = message;
        }
    }

    /// <summary>A failure of the library (the message of tavern_last_error).</summary>
    public sealed class TavernException : Exception
    {
        public TavernException(string message) : base(message) { }

        internal static TavernException Last(string what)
        {
            string e = Native.Utf8(Native.tavern_last_error());
            return new TavernException(e == null ? what : what + ": " + e);
        }
    }

    /// <summary>A host tool's definition: id, description, JSON Schema of its arguments.</summary>
    public sealed class ToolDefinition
    {
        public string Id { get; private set; }
        public string Description { get; private set; }
        /// <summary>The JSON Schema of the arguments, as JSON text.</summary>
        public string ParametersJson { get; private set; }

        public ToolDefinition(string id, string description, string parametersJson)
        {
            Id = id;
            Description = description;
            ParametersJson = parametersJson ?? "{\"type\": \"object\"}";
        }

        internal string ToJson()
        {
            return "{\"id\":" + Json.Write(Id) + ",\"description\":" + Json.Write(Description)
                + ",\"parameters\":" + ParametersJson + "}";
        }
    }

    /// <summary>One call of a host tool, as its delegate sees it.</summary>
    public sealed class ToolCall
    {
        /// <summary>Who called: host, model, model:&lt;agent&gt;, plugin:&lt;name&gt;, workflow:&lt;id&gt;, remote:&lt;client&gt;.</summary>
        public string Caller { get; private set; }
        /// <summary>The arguments as JSON text.</summary>
        public string ArgsJson { get; private set; }
        /// <summary>The arguments, parsed (see <see cref="Json.Parse"/>).</summary>
        public IDictionary<string, object> Args { get; private set; }

        internal ToolCall(string caller, string argsJson)
        {
            Caller = caller;
            ArgsJson = argsJson;
            Args = Json.Parse(argsJson) as IDictionary<string, object> ?? new Dictionary<string, object>();
        }
    }

    /// <summary>A host tool: returns the tool's value (anything <see cref="Json.Write"/> writes);
    /// throwing fails the call with the exception's message.</summary>
    public delegate object HostTool(ToolCall call);

    /// <summary>Options for one submitted call.</summary>
    public sealed class CallOptions
    {
        /// <summary>How long the calls may take, counted from the submit (host time included).</summary>
        public TimeSpan? Timeout { get; set; }
        /// <summary>Who is calling (default host): model, model:npc-1, plugin:&lt;name&gt;, ...</summary>
        public string Caller { get; set; }
        /// <summary>Refuse every call when reading the text produced warnings.</summary>
        public bool RefuseOnWarnings { get; set; }

        internal string ToJson()
        {
            var o = new Dictionary<string, object>();
            if (Timeout.HasValue) o["timeout_ms"] = (long)Math.Max(0, Timeout.Value.TotalMilliseconds);
            if (Caller != null) o["caller"] = Caller;
            if (RefuseOnWarnings) o["refuse_on_warnings"] = true;
            return Json.Write(o);
        }
    }

    /// <summary>A submitted call's number.</summary>
    public struct Ticket : IEquatable<Ticket>
    {
        public readonly ulong Id;

        public Ticket(ulong id) { Id = id; }

        public bool Equals(Ticket other) { return Id == other.Id; }
        public override bool Equals(object obj) { return obj is Ticket && Equals((Ticket)obj); }
        public override int GetHashCode() { return Id.GetHashCode(); }
        public override string ToString() { return "ticket " + Id; }
    }

    /// <summary>One call's outcome in a <see cref="CallReport"/>.</summary>
    public sealed class ToolResult
    {
        /// <summary>The canonical tool id (or what the caller wrote when it did not resolve).</summary>
        public string Tool { get; internal set; }
        public bool Ok { get; internal set; }
        /// <summary>The tool's value when Ok (parsed JSON).</summary>
        public object Value { get; internal set; }
        /// <summary>The error code when not Ok (timeout, cancelled, panicked, unknown_tool, ...).</summary>
        public string ErrorCode { get; internal set; }
        public string ErrorMessage { get; internal set; }
        /// <summary>The line a model reads back.</summary>
        public string Observation { get; internal set; }
    }

    /// <summary>What a run produced: each call's outcome, and the JSON `tavern call` prints.</summary>
    public sealed class CallReport
    {
        public IList<ToolResult> Results { get; private set; }
        /// <summary>{"results": [...], "diagnostics": [...]}</summary>
        public string Json { get; private set; }

        internal CallReport(string json)
        {
            Json = json;
            Results = new List<ToolResult>();
            var root = Tavern.Json.Parse(json) as IDictionary<string, object>;
            var results = root == null ? null : Tavern.Json.Get(root, "results") as IList<object>;
            if (results == null) return;
            foreach (var r in results)
            {
                var m = r as IDictionary<string, object>;
                if (m == null) continue;
                var err = Tavern.Json.Get(m, "error") as IDictionary<string, object>;
                Results.Add(new ToolResult
                {
                    Tool = Tavern.Json.Get(m, "tool") as string,
                    Ok = true.Equals(Tavern.Json.Get(m, "ok")),
                    Value = Tavern.Json.Get(m, "value"),
                    ErrorCode = err == null ? null : Tavern.Json.Get(err, "code") as string,
                    ErrorMessage = err == null ? null : Tavern.Json.Get(err, "message") as string,
                    Observation = Tavern.Json.Get(m, "observation") as string,
                });
            }
        }

        /// <summary>True when every call succeeded.</summary>
        public bool AllOk
        {
            get
            {
                foreach (var r in Results) if (!r.Ok) return false;
                return true;
            }
        }
    }

    /// <summary>A load problem: a broken plugin or workflow (the engine still runs).</summary>
    public sealed class Problem
    {
        public string File { get; internal set; }
        public int? Line { get; internal set; }
        public string Message { get; internal set; }
        public string Hint { get; internal set; }

        public override string ToString()
        {
            var s = File + (Line.HasValue ? ":" + Line.Value : "") + ": " + Message;
            return Hint == null ? s : s + " (" + Hint + ")";
        }
    }

    /// <summary>A tavern engine for one home directory (plugins/, workflows/, tavern.toml).
    /// Register host tools and the log callback, then Build (or just call: the first call
    /// builds). Dispose frees it.</summary>
    public sealed class Engine : IDisposable
    {
        IntPtr handle;
        // The delegates native code calls: kept alive as long as the engine.
        readonly List<object> keepAlive = new List<object>();
        readonly ulong[] finished = new ulong[64];

        public Engine(string home)
        {
            handle = Native.tavern_engine_new(Native.Bytes(home));
            if (handle == IntPtr.Zero) throw TavernException.Last("cannot make the engine");
        }

        ~Engine() { Free(); }

        public void Dispose()
        {
            Free();
            GC.SuppressFinalize(this);
        }

        void Free()
        {
            var h = handle;
            handle = IntPtr.Zero;
            if (h != IntPtr.Zero) Native.tavern_engine_free(h);
        }

        IntPtr H
        {
            get
            {
                if (handle == IntPtr.Zero) throw new ObjectDisposedException("Tavern.Engine");
                return handle;
            }
        }

        /// <summary>Registers a host tool: it runs on an engine thread, where blocking is
        /// allowed, one call at a time. Its namespace is reserved for the host.</summary>
        public void RegisterTool(ToolDefinition definition, HostTool tool)
        {
            var cb = Callback(tool);
            keepAlive.Add(cb);
            if (Native.tavern_engine_register_tool(H, Native.Bytes(definition.ToJson()), cb, IntPtr.Zero) != 0)
                throw TavernException.Last("cannot register " + definition.Id);
        }

        /// <summary>Registers a main-thread tool: it runs only inside Pump (or a blocking
        /// Call) on the thread calling this method — the game thread — so it may touch
        /// the world directly. Calls to it wait (parked) until then.</summary>
        public void RegisterMainThreadTool(ToolDefinition definition, HostTool tool)
        {
            var cb = Callback(tool);
            keepAlive.Add(cb);
            if (Native.tavern_engine_register_main_thread_tool(H, Native.Bytes(definition.ToJson()), cb, IntPtr.Zero) != 0)
                throw TavernException.Last("cannot register " + definition.Id);
        }

        /// <summary>Mods' print and api.log lines and the engine's warnings go to `log`
        /// (called on engine threads, one at a time: keep it quick). Null goes back to
        /// the default (stderr).</summary>
        public void SetLogCallback(Action<LogRecord> log)
        {
            if (log == null)
            {
                Native.tavern_engine_set_log_callback(H, null, IntPtr.Zero);
                return;
            }
            Native.LogCallback cb = (user, level, source, message) =>
            {
                try
                {
                    log(new LogRecord((LogLevel)level, Native.Utf8(source), Native.Utf8(message)));
                }
                catch (Exception)
                {
                    // Never into native code.
                }
            };
            keepAlive.Add(cb);
            Native.tavern_engine_set_log_callback(H, cb, IntPtr.Zero);
        }

        /// <summary>Loads plugins and workflows now; returns the load problems.</summary>
        public IList<Problem> Build()
        {
            if (Native.tavern_engine_build(H) < 0) throw TavernException.Last("cannot build the engine");
            return Problems;
        }

        /// <summary>The load problems (building the engine first if needed).</summary>
        public IList<Problem> Problems
        {
            get
            {
                var json = Native.TakeString(Native.tavern_engine_problems(H));
                if (json == null) throw TavernException.Last("cannot read the problems");
                var list = new List<Problem>();
                var items = Json.Parse(json) as IList<object>;
                if (items == null) return list;
                foreach (var item in items)
                {
                    var m = item as IDictionary<string, object>;
                    if (m == null) continue;
                    var line = Json.Get(m, "line");
                    list.Add(new Problem
                    {
                        File = Json.Get(m, "file") as string,
                        Line = line == null ? (int?)null : Convert.ToInt32(line, CultureInfo.InvariantCulture),
                        Message = Json.Get(m, "message") as string,
                        Hint = Json.Get(m, "hint") as string,
                    });
                }
                return list;
            }
        }

        /// <summary>Runs the calls in `text` as the host, blocking until they finish (this
        /// thread's main-thread tools run meanwhile).</summary>
        public CallReport Call(string text)
        {
            var json = Native.TakeString(Native.tavern_engine_call(H, Native.Bytes(text)));
            if (json == null) throw TavernException.Last("the call could not run");
            return new CallReport(json);
        }

        /// <summary>Queues `text` to run on the engine's threads; returns at once.</summary>
        public Ticket Submit(string text, CallOptions options = null)
        {
            var opts = options == null ? null : Native.Bytes(options.ToJson());
            ulong t = Native.tavern_engine_submit_with(H, Native.Bytes(text), opts);
            if (t == 0) throw TavernException.Last("cannot submit");
            return new Ticket(t);
        }

        /// <summary>Stops a submission still running (its calls end as cancelled); false
        /// when it had already finished.</summary>
        public bool Cancel(Ticket ticket)
        {
            int r = Native.tavern_engine_cancel(H, ticket.Id);
            if (r < 0) throw TavernException.Last("cannot cancel " + ticket);
            return r == 0;
        }

        /// <summary>Runs this thread's parked main-thread calls and collects finished
        /// submissions within `budget` (late by one handler's run at most); returns the
        /// tickets that finished — Take each.</summary>
        public IList<Ticket> Pump(TimeSpan budget)
        {
            var done = new List<Ticket>();
            uint us = (uint)Math.Min(uint.MaxValue, Math.Max(0, budget.Ticks / 10));
            int n = Native.tavern_engine_pump_finished(H, us, finished, (uint)finished.Length);
            while (true)
            {
                if (n < 0) throw TavernException.Last("pump failed");
                for (int i = 0; i < n; i++) done.Add(new Ticket(finished[i]));
                if (n < finished.Length) return done;
                // More finished than the array held: the rest, without pumping again.
                n = Native.tavern_engine_pump_finished(H, 0, finished, (uint)finished.Length);
            }
        }

        /// <summary>A finished submission's report (then forgotten); null while pending.</summary>
        public CallReport Take(Ticket ticket)
        {
            var json = Native.TakeString(Native.tavern_engine_take(H, ticket.Id));
            if (json != null) return new CallReport(json);
            if (Native.tavern_last_error() != IntPtr.Zero) throw TavernException.Last("cannot take " + ticket);
            return null;
        }

        static Native.ToolCallback Callback(HostTool tool)
        {
            return (user, args) =>
            {
                string result;
                try
                {
                    var call = new ToolCall(Native.Utf8(Native.tavern_current_caller()) ?? "host", Native.Utf8(args));
                    result = Json.Write(tool(call));
                }
                catch (Exception e)
                {
                    var m = new Dictionary<string, object>();
                    m["error"] = e.Message;
                    result = Json.Write(m);
                }
                return Native.tavern_malloc_string(Native.Bytes(result));
            };
        }
    }

    /// <summary>A small JSON reader and writer: objects are IDictionary&lt;string, object&gt;
    /// (in order), arrays IList&lt;object&gt;, numbers double (long when whole), strings,
    /// bools and null.</summary>
    public static class Json
    {
        /// <summary>The value of `key`, or null.</summary>
        public static object Get(IDictionary<string, object> o, string key)
        {
            object v;
            return o.TryGetValue(key, out v) ? v : null;
        }

        public static object Parse(string text)
        {
            if (text == null) return null;
            int i = 0;
            var v = Value(text, ref i);
            Ws(text, ref i);
            if (i != text.Length) throw new FormatException("JSON: trailing text at " + i);
            return v;
        }

        static void Ws(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        static object Value(string s, ref int i)
        {
            Ws(s, ref i);
            if (i >= s.Length) throw new FormatException("JSON: unexpected end");
            char c = s[i];
            if (c == '{')
            {
                var o = new Dictionary<string, object>();
                i++;
                Ws(s, ref i);
                if (s[i] == '}') { i++; return o; }
                while (true)
                {
                    Ws(s, ref i);
                    var k = Str(s, ref i);
                    Ws(s, ref i);
                    if (s[i] != ':') throw new FormatException("JSON: ':' expected at " + i);
                    i++;
                    o[k] = Value(s, ref i);
                    Ws(s, ref i);
                    if (s[i] == ',') { i++; continue; }
                    if (s[i] == '}') { i++; return o; }
                    throw new FormatException("JSON: ',' or '}' expected at " + i);
                }
            }
            if (c == '[')
            {
                var a = new List<object>();
                i++;
                Ws(s, ref i);
                if (s[i] == ']') { i++; return a; }
                while (true)
                {
                    a.Add(Value(s, ref i));
                    Ws(s, ref i);
                    if (s[i] == ',') { i++; continue; }
                    if (s[i] == ']') { i++; return a; }
                    throw new FormatException("JSON: ',' or ']' expected at " + i);
                }
            }
            if (c == '"') return Str(s, ref i);
            if (s.Length - i >= 4 && string.CompareOrdinal(s, i, "true", 0, 4) == 0) { i += 4; return true; }
            if (s.Length - i >= 5 && string.CompareOrdinal(s, i, "false", 0, 5) == 0) { i += 5; return false; }
            if (s.Length - i >= 4 && string.CompareOrdinal(s, i, "null", 0, 4) == 0) { i += 4; return null; }
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            if (start == i) throw new FormatException("JSON: unexpected '" + c + "' at " + i);
            var num = s.Substring(start, i - start);
            long l;
            if (long.TryParse(num, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out l)) return l;
            return double.Parse(num, NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        static string Str(string s, ref int i)
        {
            if (s[i] != '"') throw new FormatException("JSON: string expected at " + i);
            i++;
            var b = new StringBuilder();
            while (s[i] != '"')
            {
                char c = s[i++];
                if (c != '\\') { b.Append(c); continue; }
                char e = s[i++];
                switch (e)
                {
                    case 'n': b.Append('\n'); break;
                    case 't': b.Append('\t'); break;
                    case 'r': b.Append('\r'); break;
                    case 'b': b.Append('\b'); break;
                    case 'f': b.Append('\f'); break;
                    case 'u':
                        b.Append((char)int.Parse(s.Substring(i, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture));
                        i += 4;
                        break;
                    default: b.Append(e); break;
                }
            }
            i++;
            return b.ToString();
        }

        /// <summary>Compact JSON, as serde_json writes it ({"a":1}).</summary>
        public static string Write(object v)
        {
            var b = new StringBuilder();
            Write(b, v);
            return b.ToString();
        }

        static void Write(StringBuilder b, object v)
        {
            if (v == null) { b.Append("null"); return; }
            if (v is string) { Quote(b, (string)v); return; }
            if (v is bool) { b.Append((bool)v ? "true" : "false"); return; }
            if (v is double || v is float)
            {
                b.Append(Convert.ToDouble(v, CultureInfo.InvariantCulture).ToString("R", CultureInfo.InvariantCulture));
                return;
            }
            if (v is IConvertible && !(v is char))
            {
                b.Append(Convert.ToString(v, CultureInfo.InvariantCulture));
                return;
            }
            var dict = v as IDictionary;
            if (dict != null)
            {
                b.Append('{');
                bool first = true;
                foreach (DictionaryEntry kv in dict)
                {
                    if (!first) b.Append(',');
                    first = false;
                    Quote(b, Convert.ToString(kv.Key, CultureInfo.InvariantCulture));
                    b.Append(':');
                    Write(b, kv.Value);
                }
                b.Append('}');
                return;
            }
            var list = v as IEnumerable;
            if (list != null)
            {
                b.Append('[');
                bool first = true;
                foreach (var x in list)
                {
                    if (!first) b.Append(',');
                    first = false;
                    Write(b, x);
                }
                b.Append(']');
                return;
            }
            Quote(b, v.ToString());
        }

        static void Quote(StringBuilder b, string s)
        {
            b.Append('"');
            foreach (char c in s)
            {
                switch (c)
                {
                    case '"': b.Append("\\\""); break;
                    case '\\': b.Append("\\\\"); break;
                    case '\n': b.Append("\\n"); break;
                    case '\r': b.Append("\\r"); break;
                    case '\t': b.Append("\\t"); break;
                    default:
                        if (c < 0x20) b.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                        else b.Append(c);
                        break;
                }
            }
            b.Append('"');
        }
    }

    /// <summary>The C ABI, as include/tavern.h declares it.</summary>
    internal static class Native
    {
        const string Lib = "tavern_capi";

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate IntPtr ToolCallback(IntPtr userData, IntPtr argsJson);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void LogCallback(IntPtr userData, int level, IntPtr source, IntPtr message);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_engine_new(byte[] home);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void tavern_engine_free(IntPtr engine);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int tavern_engine_register_tool(IntPtr engine, byte[] definitionJson, ToolCallback callback, IntPtr userData);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int tavern_engine_register_main_thread_tool(IntPtr engine, byte[] definitionJson, ToolCallback callback, IntPtr userData);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void tavern_engine_set_log_callback(IntPtr engine, LogCallback callback, IntPtr userData);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int tavern_engine_build(IntPtr engine);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_engine_problems(IntPtr engine);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_engine_call(IntPtr engine, byte[] text);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern ulong tavern_engine_submit_with(IntPtr engine, byte[] text, byte[] optionsJson);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int tavern_engine_cancel(IntPtr engine, ulong ticket);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int tavern_engine_pump_finished(IntPtr engine, uint budgetUs, [Out] ulong[] finished, uint capacity);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_engine_take(IntPtr engine, ulong ticket);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_last_error();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_current_caller();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr tavern_malloc_string(byte[] s);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void tavern_string_free(IntPtr s);

        /// <summary>NUL-terminated UTF-8 (null stays null).</summary>
        internal static byte[] Bytes(string s)
        {
            if (s == null) return null;
            var n = Encoding.UTF8.GetByteCount(s);
            var b = new byte[n + 1];
            Encoding.UTF8.GetBytes(s, 0, s.Length, b, 0);
            return b;
        }

        /// <summary>A borrowed NUL-terminated UTF-8 string (NULL: null).</summary>
        internal static string Utf8(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            var b = new byte[n];
            Marshal.Copy(p, b, 0, n);
            return Encoding.UTF8.GetString(b);
        }

        /// <summary>A string the library handed over: copied, then freed.</summary>
        internal static string TakeString(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            try { return Utf8(p); }
            finally { tavern_string_free(p); }
        }
    }
}
