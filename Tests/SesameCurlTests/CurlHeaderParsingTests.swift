import Foundation
import Sesame
import Testing

@testable import SesameCurl
