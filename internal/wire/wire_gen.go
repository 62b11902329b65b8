// Code generated from internal/vm/wire.h by gen_test.go; DO NOT EDIT.

package wire

const (
	// a new request: payload is a request head; aux is the app id
	InRequest = 1
	// request body bytes
	InBody = 2
	// request body complete; flags say how it ended
	InBodyEnd = 3
	// the client took aux response bytes: open the window
	InCredit = 4
	// the client went away (RV_FLAG_MALFORMED: its body was malformed)
	InCancel = 5
	// the response was written (flags: RV_FLAG_ERROR if not)
	InDone = 6
	// control: load a rackup; payload is strings: rackup, environment, upstreams
	InLoadApp = 7
	// control: drop app aux once its requests end
	InUnloadApp = 8
	// control: leave the loop and shut the VM down
	InStop = 9
	// the outcome of upstream call aux: an upstream reply
	InUpstreamReply = 10
	// raise in request stream's fiber (0: every request); aux: RV_INTR_*
	InInterrupt = 11
	// the connection is the app's: aux is its descriptor (the VM owns it; RV_FLAG_TCP: the client's socket); RV_FLAG_FAILED: it could not be handed over, payload says why
	InHijacked = 12
	// control (a worker): read and write the front end's socket, descriptor aux, from now on, its requests for app flags; payload: bytes of it already read (rv_relay.c)
	InRelay = 13
	// control (a template): fork a worker; aux: its socket (low 32 bits) and urgent socket (high), flags: its slot (rv_template.c)
	InFork = 14
	// control: run the app's hooks of aux (RV_HOOKS_*); flags: the worker's index; the reply's text is what a block raised (rv_hooks.c)
	InHooks = 15
)

const (
	// Ruvoy.before_fork's: in a template, before its first fork
	HooksBeforeFork = 1
	HooksWorkerBoot = 2
)

const (
	// status and queue time (aux) and a response head, then maybe body bytes
	OutHead = 32
	// response body bytes
	OutData = 33
	// a response head whose body is the file it carries (aux: as RV_OUT_HEAD's)
	OutFile = 34
	// the response failed: cut it; before the head, aux is the status to answer (0: 500)
	OutReset = 35
	// nothing but flags (RV_FLAG_END / RV_FLAG_FINAL)
	OutEnd = 36
	// a log entry: flags is the level; payload is strings: message, then name/value pairs (a name ending in _ms: a number)
	OutLog = 37
	// reply to a control message; aux is its result, payload a text
	OutReply = 38
	// the app took aux request body bytes: Go may read on
	OutCredit = 39
	// call an upstream; aux is the call id; payload an upstream call
	OutUpstream = 40
	// the caller of upstream call aux stopped waiting
	OutUpstreamCancel = 41
	// send a 103 before the head; payload is strings: name/value pairs
	OutEarlyHints = 42
	// hand the connection to the app: no payload (env["rack.hijack"]), or a response head Go writes first (aux: as an RV_OUT_HEAD's, status 0 without a head)
	OutHijack = 43
	// a worker's socket is done (aux: RV_RELAY_*): its Go side stops the worker
	OutRelayEnd = 44
)

const (
	// the front end sent RV_IN_STOP
	RelayStop = 0
	// the front end closed the socket
	RelayClosed = 1
	RelayFailed = 2
)

const (
	// front end -> worker, first: JSON settings (the app, the VM's options)
	WorkerConfig = 96
	// worker -> front end: aux 1 the app loaded, 0 it failed (payload: Ruby's error)
	WorkerReady = 97
	// worker -> front end: the VM's figures, RV_WORKER_STATS_COUNT u64s (vm.h's rv_vm_stats order), then its RSS
	WorkerStats = 98
	// worker -> front end: aux 1 Ruby code holds the VM thread, 0 it let go
	WorkerHeld = 99
)

const (
	// front end -> template, first: its settings (above)
	TemplateBoot = 112
	// front end -> template: fork the worker of slot flags; its socket and urgent socket come with the frame (SCM_RIGHTS)
	TemplateFork = 113
	// template -> front end: aux the app's number once it loaded, or the forked worker's pid; 0: it failed, payload says why
	TemplateReply = 114
)

const (
	FrameHeader      = 32
	WorkerStatsCount = 18
	// a longer frame is a broken stream: the worker is replaced
	FrameMax    = 1073741824
	FrameMaxFds = 200
)

const (
	// out: the response is complete
	FlagEnd = 1
	// out: the VM is done with this stream
	FlagFinal = 2
	// out: send RV_IN_DONE once the response is written
	FlagWantDone = 4
	// in: the body or the write failed
	FlagError = 8
	// in: the body went over the max body size
	FlagTooLarge = 16
	// in (upstream reply): the call failed; payload says why
	FlagFailed = 32
	// in (body end, cancel): the request body's framing is invalid
	FlagMalformed = 64
	FlagTcp       = 128
)

const (
	// it ran past its request timeout: Ruvoy::RequestTimeout
	IntrTimeout = 1
	// the stop's grace period is over: Ruvoy::Shutdown
	IntrShutdown = 2
	// Ruby code gave the exception (Rack::Timeout)
	IntrRuby = 3
	IntrExit = 4
)

const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

const (
	// arrived over TLS
	ReqTLS = 1
	// a body follows in RV_IN_BODY messages
	ReqBody = 2
	// request target was "*" (OPTIONS *)
	ReqAsterisk = 4
	// method is HEAD: no body is sent
	ReqHead = 8
	// the connection can be handed to the app (HTTP/1.x, no request body)
	ReqHijack = 16
	// 103 Early Hints reach this client: env["rack.early_hints"]
	ReqEarlyHints = 32
)

const (
	// u8
	ReqFlagsAt = 0
	// u32
	ReqWindowAt = 4
	// u64
	ReqArrivedAt = 8
	// the first field
	ReqFieldsAt = 16
)

const (
	FieldMethod = 0
	// PATH_INFO, still escaped
	FieldPath  = 1
	FieldQuery = 2
	// REQUEST_URI
	FieldURI        = 3
	FieldServerName = 4
	FieldServerPort = 5
	FieldProtocol   = 6
	FieldRemoteAddr = 7
	// absent without one
	FieldContentLength = 8
	// absent without one
	FieldContentType = 9
	// JSON for env["ruvoy.context"]; absent unless the app asked
	FieldContext = 10
	// where a server in front mounted the app; empty: at the root
	FieldScriptName = 11
	// the user a server in front authenticated; absent without one
	FieldRemoteUser = 12
	FieldCount      = 13
)

const (
	AuxQueuedShift = 32
)

const (
	// i64
	RespLengthAt = 0
	// i32
	RespFDAt = 8
	// u16
	RespCountAt   = 12
	RespHeadersAt = 14
)

const (
	// What rack.input keeps in memory for rewind before it moves to a file (lib/ruvoy/input.rb reads Ruvoy::REWIND_IN_MEMORY); the body budget counts it.
	RewindInMemory = 131072
)

const Absent = 4294967295

// HeaderNames are the request headers with a code: their index.
var HeaderNames = [...]string{
	"",
	"Accept",
	"Accept-Charset",
	"Accept-Encoding",
	"Accept-Language",
	"Authorization",
	"Cache-Control",
	"Connection",
	"Cookie",
	"Dnt",
	"Host",
	"If-Modified-Since",
	"If-None-Match",
	"Keep-Alive",
	"Origin",
	"Pragma",
	"Range",
	"Referer",
	"Sec-Ch-Ua",
	"Sec-Ch-Ua-Mobile",
	"Sec-Ch-Ua-Platform",
	"Sec-Fetch-Dest",
	"Sec-Fetch-Mode",
	"Sec-Fetch-Site",
	"Sec-Fetch-User",
	"Te",
	"Upgrade",
	"Upgrade-Insecure-Requests",
	"User-Agent",
	"Via",
	"X-Csrf-Token",
	"X-Forwarded-For",
	"X-Forwarded-Host",
	"X-Forwarded-Proto",
	"X-Request-Id",
	"X-Requested-With",
}
