module @tp {
  func.func public @main(%v0: tensor<4xi32>, %v1: tensor<3xi64>, %v2: tensor<3xi32>) -> (tensor<4xi32>) {
    %v3 = "stablehlo.constant"() {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %v4 = "stablehlo.broadcast_in_dim"(%v3) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v5 = "stablehlo.compare"(%v1, %v4) {comparison_direction = #stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
    %v6 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v7 = "stablehlo.broadcast_in_dim"(%v6) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v8 = "stablehlo.compare"(%v1, %v7) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
    %v9 = "stablehlo.or"(%v8, %v5) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
    %v10 = "stablehlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
    %v11 = "stablehlo.reduce"(%v9, %v10) ({
      ^bb0(%v12: tensor<i1>, %v13: tensor<i1>):
        %v14 = "stablehlo.or"(%v12, %v13) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        "stablehlo.return"(%v14) : (tensor<i1>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<3xi1>, tensor<i1>) -> tensor<i1>
    %v15 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v16 = "stablehlo.broadcast_in_dim"(%v15) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v17 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v18 = "stablehlo.broadcast_in_dim"(%v17) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v19 = "stablehlo.multiply"(%v1, %v18) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %v20 = "stablehlo.add"(%v16, %v19) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %v21 = "stablehlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
    %v22 = "stablehlo.broadcast_in_dim"(%v21) {broadcast_dimensions = array<i64>} : (tensor<i1>) -> tensor<4xi1>
    %v23 = "stablehlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    %v24 = "stablehlo.broadcast_in_dim"(%v23) {broadcast_dimensions = array<i64>} : (tensor<i1>) -> tensor<3xi1>
    %v25 = "stablehlo.scatter"(%v22, %v20, %v24) ({
      ^bb0(%v26: tensor<i1>, %v27: tensor<i1>):
        %v28 = "stablehlo.or"(%v26, %v27) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        "stablehlo.return"(%v28) : (tensor<i1>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xi1>, tensor<3xi64>, tensor<3xi1>) -> tensor<4xi1>
    %v29 = "stablehlo.constant"() {value = dense<-2147483648> : tensor<i32>} : () -> tensor<i32>
    %v30 = "stablehlo.broadcast_in_dim"(%v29) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<4xi32>
    %v31 = "stablehlo.select"(%v25, %v30, %v0) : (tensor<4xi1>, tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %v32 = "stablehlo.scatter"(%v31, %v20, %v2) ({
      ^bb0(%v33: tensor<i32>, %v34: tensor<i32>):
        %v35 = "stablehlo.maximum"(%v33, %v34) : (tensor<i32>, tensor<i32>) -> tensor<i32>
        "stablehlo.return"(%v35) : (tensor<i32>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xi32>, tensor<3xi64>, tensor<3xi32>) -> tensor<4xi32>
    "func.return"(%v32) : (tensor<4xi32>) -> ()
  }
}
