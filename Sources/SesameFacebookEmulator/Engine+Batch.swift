import Foundation
import Sesame
import SesameEmulator

extension FacebookState {
    /// `POST /` with `batch`: each operation answered in order, as `{"code", "headers", "body"}` with
    /// the body a JSON string; a refused batch-level token answers one error for the whole batch.
    func batch(_ context: GraphContext) throws -> GraphAnswer {
        guard context.segments.isEmpty, !context.isBatchItem else {
            throw GraphError.invalidParameter("A batch cannot contain a batch.")
        }
        guard let text = context.parameters["batch"], case .array(let operations)? = context.request.batchJSON(text)
        else {
            throw GraphError.invalidParameter("The parameter batch must be a JSON array of requests.")
        }
        guard !operations.isEmpty else { throw GraphError.invalidParameter("The batch is empty.") }
        guard operations.count <= limits.maxBatchSize else {
            throw GraphError.invalidParameter(
                "Too many requests in batch message. Maximum batch size is \(limits.maxBatchSize)")
        }
        if let error = context.tokenError { throw error }
        let includeHeaders = context.parameters.bool("include_headers", default: true)
        let batchToken = Self.accessToken(in: context.request, parameters: context.parameters)
        var results: [Reply.BatchItem?] = []
        var named: [String: JSONValue] = [:]
        var failed: Set<String> = []
        for operation in operations {
            let outcome = batchOperation(
                operation, context: context, token: batchToken, named: named, failed: failed)
            let response = outcome.response
            if let name = outcome.name {
                if response.isSuccess {
                    named[name] = response.body.json ?? .null
                } else {
                    failed.insert(name)
                }
            }
            if response.isSuccess && outcome.omitOnSuccess {
                results.append(nil)
                continue
            }
            results.append(
                Reply.BatchItem(
                    status: response.status, headers: includeHeaders ? response.headers : nil, body: response.body))
        }
        return GraphAnswer(body: .null, batch: results)
    }

    private struct OperationOutcome {
        var response: Reply
        var name: String?
        var omitOnSuccess: Bool
    }

    private func batchOperation(
        _ operation: JSONValue, context: GraphContext, token: String?, named: [String: JSONValue], failed: Set<String>
    ) -> OperationOutcome {
        let appID = appID(for: context)
        func failure(_ error: GraphError, name: String? = nil) -> OperationOutcome {
            OperationOutcome(response: graphErrorResponse(error, appID: appID), name: name, omitOnSuccess: false)
        }
        guard case .object(let fields) = operation else {
            return failure(.invalidParameter("Each batch operation must be a JSON object."))
        }
        let name = fields["name"]?.stringValue
        let omitOnSuccess = fields["omit_response_on_success"]?.boolValue ?? (name != nil)
        guard let method = fields["method"]?.stringValue.map({ HTTPMethod(rawValue: $0) }) ?? .some(.get),
            [.get, .post, .delete].contains(method)
        else {
            return failure(.invalidParameter("Each batch operation needs a method of GET, POST or DELETE."), name: name)
        }
        guard var relative = fields["relative_url"]?.stringValue, relative.utf8.count <= limits.maxPathBytes else {
            return failure(.invalidParameter("Each batch operation needs a relative_url."), name: name)
        }
        var body = fields["body"]?.stringValue ?? ""
        if let dependency = fields["depends_on"]?.stringValue, failed.contains(dependency) || named[dependency] == nil {
            return failure(
                .invalidParameter("This operation depends on '\(dependency)', which failed or has not run."), name: name
            )
        }
        do {
            relative = try Self.substituteResults(in: relative, named: named, encode: true)
            body = try Self.substituteResults(in: body, named: named, encode: true)
        } catch let error as GraphError {
            return failure(error, name: name)
        } catch {
            return failure(.unknown, name: name)
        }
        if !relative.hasPrefix("/") { relative = "/" + relative }
        guard let url = URL(string: "http://batch" + relative) else {
            return failure(.invalidParameter("The relative_url '\(relative)' is not a valid URL."), name: name)
        }
        var headers: HTTPHeaders = ["Content-Type": "application/x-www-form-urlencoded"]
        if let host = context.request.headers["Host"] { headers["Host"] = host }
        var request = EmulatorRequest(method: method, url: url, headers: headers, body: Data(body.utf8))
        let operationToken = fields["access_token"]?.stringValue ?? token
        if let operationToken, !request.query.contains(where: { $0.0 == "access_token" }),
            !body.contains("access_token=")
        {
            request.query.append(("access_token", operationToken))
        }
        let (segments, versionPrefix) = Self.splitVersion(request.path.split(separator: "/").map(String.init))
        guard segments.first != "__sesame", !(segments.first == "dialog") else {
            return failure(.unsupported(method, id: segments.first ?? ""), name: name)
        }
        do {
            let itemContext = try graphContext(
                request, segments: segments, versionPrefix: versionPrefix, isBatchItem: true)
            let itemAppID = self.appID(for: itemContext)
            let now = self.now
            usage.withLock { $0.count(appID: itemAppID, at: now) }
            // Error scenarios act on the calls inside a batch as on calls on their own.
            if let error = scenarioEffects(for: itemContext).error {
                return OperationOutcome(
                    response: graphErrorResponse(error, appID: itemAppID), name: name, omitOnSuccess: omitOnSuccess)
            }
            return OperationOutcome(
                response: answer(itemContext, appID: itemAppID), name: name, omitOnSuccess: omitOnSuccess)
        } catch let error as GraphError {
            return failure(error, name: name)
        } catch {
            return failure(.unknown, name: name)
        }
    }

    /// Replaces `{result=NAME:$.path}` with values from earlier named operations. A path is dotted
    /// (`$.id`, `$.data.0.id`); `*` takes every element and joins the values with commas.
    static func substituteResults(in text: String, named: [String: JSONValue], encode: Bool) throws -> String {
        guard text.contains("{result=") else { return text }
        var output = ""
        var rest = Substring(text)
        while let start = rest.range(of: "{result=") {
            output += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw GraphError.invalidParameter("A {result=…} reference is not closed.")
            }
            let reference = rest[start.upperBound..<end]
            guard let colon = reference.firstIndex(of: ":") else {
                throw GraphError.invalidParameter("A {result=NAME:$.path} reference needs a JSONPath.")
            }
            let name = String(reference[..<colon])
            let path = reference[reference.index(after: colon)...]
            guard let value = named[name] else {
                throw GraphError.invalidParameter("There is no earlier operation named '\(name)'.")
            }
            guard path.hasPrefix("$") else { throw GraphError.invalidParameter("A JSONPath starts with $.") }
            var values: [JSONValue] = [value]
            for key in path.dropFirst().split(separator: ".") {
                values = values.flatMap { node -> [JSONValue] in
                    if key == "*" { return node.arrayValue ?? node.objectValue.map { Array($0.values) } ?? [] }
                    if let index = Int(key), let element = node[index] { return [element] }
                    return node[String(key)].map { [$0] } ?? []
                }
            }
            let joined = values.map { $0.stringValue ?? $0.jsonText }.joined(separator: ",")
            output += encode ? FormWriter.escape(joined).replacingOccurrences(of: "%2C", with: ",") : joined
            rest = rest[rest.index(after: end)...]
        }
        output += rest
        return output
    }
}
